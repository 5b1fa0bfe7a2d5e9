# Stops and removes the service (like nats-streaming-server -sl quit=<service>), the shims
# and the venv. The configuration, data and logs in %ProgramData%\stanpkg stay.
$ErrorActionPreference = 'Stop'

$pp = Get-PackageParameters
$dataRoot = Join-Path $env:ProgramData 'stanpkg'
$venv = Join-Path $dataRoot 'venv'
$venvPython = Join-Path $venv 'Scripts\python.exe'

$stateFile = Join-Path $dataRoot 'service.json'

# The services to remove: the names given, the one the install remembered (a custom
# /ServiceName or /SyslogName), and the default; the rule is in stanpkg_winsvc.logic.
$names = @()
if (Test-Path $venvPython) {
    $names = & $venvPython -m stanpkg_winsvc plan-uninstall --state $stateFile "--service-name=$($pp['ServiceName'])" "--syslog-name=$($pp['SyslogName'])"
    if ($LASTEXITCODE -ne 0) { throw "could not read $stateFile" }
}

foreach ($name in $names) {
    $service = Get-Service -Name $name -ErrorAction SilentlyContinue
    if ($service) {
        Write-Host "Stopping and removing service $name"
        & $venvPython -m stanpkg_winsvc remove --service-name $name
        if ($LASTEXITCODE -ne 0) { throw "could not remove service $name" }
    }
}
if (Test-Path $stateFile) { Remove-Item -Force $stateFile }

Uninstall-BinFile -Name 'stanpkg'
Uninstall-BinFile -Name 'nats-streaming-server'
if (Test-Path $venv) { Remove-Item -Recurse -Force $venv }
Write-Host "Configuration and data are kept in $dataRoot"
