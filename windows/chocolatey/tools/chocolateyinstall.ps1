# Installs stanpkg offline from the wheels in this package into its own venv, puts
# stanpkg/nats-streaming-server on the PATH, writes the default config (kept if present),
# validates it, and registers + starts the Windows service (as NT SERVICE\<name>, in a
# folder only Administrators, SYSTEM and that account can use).
$ErrorActionPreference = 'Stop'

$toolsDir = Split-Path -Parent $MyInvocation.MyCommand.Definition
$pp = Get-PackageParameters
$dataRoot = Join-Path $env:ProgramData 'stanpkg'
$venv = Join-Path $dataRoot 'venv'
# What this install chose (service and syslog names, config): upgrades and the uninstall
# read it back, so a custom /ServiceName or /SyslogName need not be given again.
$stateFile = Join-Path $dataRoot 'service.json'

function Find-Python311 {
    # The python311 dependency installs here; the py launcher finds other installs.
    $candidates = @(
        (Join-Path $env:SystemDrive 'Python311\python.exe'),
        (Join-Path $env:ProgramFiles 'Python311\python.exe')
    )
    foreach ($candidate in $candidates) {
        if (Test-Path $candidate) { return $candidate }
    }
    $py = Get-Command py.exe -ErrorAction SilentlyContinue
    if ($py) {
        $exe = & $py.Source -3.11 -c 'import sys; print(sys.executable)'
        if ($LASTEXITCODE -eq 0) { return $exe.Trim() }
    }
    throw 'Python 3.11 not found (the python311 package should have installed it)'
}

function Invoke-Checked {
    param([string]$Exe, [string[]]$Arguments)
    & $Exe @Arguments
    if ($LASTEXITCODE -ne 0) { throw "$Exe $($Arguments -join ' ') exited with $LASTEXITCODE" }
}

$python = Find-Python311
# The decisions live in stanpkg_winsvc.logic (tested): the parameters given, else the
# previous install's (service.json), else the defaults. Parameters go as --name=VALUE:
# Windows PowerShell drops empty arguments to native commands.
$planArgs = @('plan-install', '--state', $stateFile,
    '--default-config', (Join-Path $dataRoot 'stan.conf'),
    "--service-name=$($pp['ServiceName'])", "--syslog-name=$($pp['SyslogName'])",
    "--config=$($pp['Config'])")
$planJson = & $python -c "import sys; sys.path.insert(0, r'$toolsDir'); from stanpkg_winsvc.__main__ import main; sys.exit(main(sys.argv[1:]))" @planArgs
if ($LASTEXITCODE -ne 0) { throw "invalid package parameters" }
$plan = "$planJson" | ConvertFrom-Json
$serviceName = $plan.service_name
$syslogName = $plan.syslog_name
$config = $plan.config

# An upgrade replaces the venv: stop the running service first, as the reference's -sl quit;
# a service installed under another name before is removed (the new name replaces it).
foreach ($old in (@($serviceName, $plan.replaces) | Where-Object { $_ } | Select-Object -Unique)) {
    if ((Get-Service -Name $old -ErrorAction SilentlyContinue) -and (Test-Path (Join-Path $venv 'Scripts\python.exe'))) {
        Write-Host "Stopping service $old for the upgrade"
        Invoke-Checked (Join-Path $venv 'Scripts\python.exe') @('-m', 'stanpkg_winsvc', 'remove', '--service-name', $old)
    }
}

foreach ($dir in @($dataRoot, (Join-Path $dataRoot 'data'), (Join-Path $dataRoot 'log'))) {
    New-Item -ItemType Directory -Force -Path $dir | Out-Null
}
if (Test-Path $venv) { Remove-Item -Recurse -Force $venv }
Invoke-Checked $python @('-m', 'venv', $venv)
$venvPython = Join-Path $venv 'Scripts\python.exe'
Invoke-Checked $venvPython @('-m', 'pip', 'install', '--quiet', '--no-index',
    '--find-links', (Join-Path $toolsDir 'wheels'), 'stanpkg[postgres,mysql,crc]', 'pywin32')
$sitePackages = Join-Path $venv 'Lib\site-packages'
Copy-Item -Recurse -Force (Join-Path $toolsDir 'stanpkg_winsvc') $sitePackages

if (-not (Test-Path $config)) {
    Copy-Item (Join-Path $toolsDir 'stan.conf') $config
}

# Shims on the PATH for both commands.
Install-BinFile -Name 'stanpkg' -Path (Join-Path $venv 'Scripts\stanpkg.exe')
Install-BinFile -Name 'nats-streaming-server' -Path (Join-Path $venv 'Scripts\nats-streaming-server.exe')

# The configuration is checked before the service is (re)started, as the unit's ExecStartPre.
Invoke-Checked (Join-Path $venv 'Scripts\stanpkg.exe') @('validate', $config)

if ($pp['NoService']) {
    Write-Host 'NoService: stanpkg installed without a service'
    return
}
$installArgs = @('-m', 'stanpkg_winsvc', 'install', '--service-name', $serviceName,
    '--python', $python, '--venv', $venv, '--config', $config)
if ($syslogName) { $installArgs += @('--syslog-name', $syslogName) }
# Registers the service under its virtual account NT SERVICE\<name> (not LocalSystem),
# locks the install folder down with icacls (Administrators and SYSTEM full control, the
# account read/execute, data and log writable) and writes service.json.
Invoke-Checked $venvPython $installArgs
Start-Service -Name $serviceName
Write-Host "Service $serviceName started; stop it with: nats-streaming-server -sl quit=$serviceName"
