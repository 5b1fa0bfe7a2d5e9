# Stops and removes the service (like nats-streaming-server -sl quit=<service>), the shims
# and the venv. The configuration, data and logs in %ProgramData%\stanpkg stay.
$ErrorActionPreference = 'Stop'

$pp = Get-PackageParameters
$dataRoot = Join-Path $env:ProgramData 'stanpkg'
$venv = Join-Path $dataRoot 'venv'
$venvPython = Join-Path $venv 'Scripts\python.exe'

$names = @()
if ($pp['ServiceName']) { $names += $pp['ServiceName'] }
if ($pp['SyslogName']) { $names += $pp['SyslogName'] }
$names += 'nats-streaming-server'

foreach ($name in ($names | Select-Object -Unique)) {
    $service = Get-Service -Name $name -ErrorAction SilentlyContinue
    if ($service -and (Test-Path $venvPython)) {
        Write-Host "Stopping and removing service $name"
        & $venvPython -m stanpkg_winsvc remove --service-name $name
        if ($LASTEXITCODE -ne 0) { throw "could not remove service $name" }
    }
}

Uninstall-BinFile -Name 'stanpkg'
Uninstall-BinFile -Name 'nats-streaming-server'
if (Test-Path $venv) { Remove-Item -Recurse -Force $venv }
Write-Host "Configuration and data are kept in $dataRoot"
